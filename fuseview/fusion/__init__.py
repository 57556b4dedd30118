"""Fusion layer: rule catalogue, scan, plan, apply, validate. Imports no Qt."""
