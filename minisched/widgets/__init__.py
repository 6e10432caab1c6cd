"""Interactive explorers for the notebooks. Callbacks are plain functions, tested headless."""
