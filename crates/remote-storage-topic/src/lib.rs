//! krabka-remote-storage-topic: see DESIGN.md (skeleton; filled in by its issue).
