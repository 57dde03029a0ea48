"""Pure functions over the model."""
