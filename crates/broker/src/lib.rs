//! krabka broker (skeleton).
