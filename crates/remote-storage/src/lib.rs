//! krabka-remote-storage: see DESIGN.md (skeleton; filled in by its issue).
