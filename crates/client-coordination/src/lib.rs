//! krabka-client-coordination: see DESIGN.md (skeleton; filled in by its issue).
