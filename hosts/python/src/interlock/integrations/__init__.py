"""Integrations with agent frameworks that have no tool-gating config of their own: Google
ADK (:mod:`interlock.integrations.adk`, the original's ``Guard``)."""
