"""Shared test settings: a non-interactive matplotlib backend."""
import matplotlib

matplotlib.use("Agg")
