//! krabka-object-store: see DESIGN.md (skeleton; filled in by its issue).
