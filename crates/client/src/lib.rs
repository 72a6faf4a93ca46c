//! krabka-client: see DESIGN.md (skeleton; filled in by its issue).
