"""Collectives and fused compute+communication ops, written once over the runtime's
one-sided primitives and the handler's tensor-ops protocol (see fused.py)."""
