//! Intake validation of `POST /v1/queries` bodies.
