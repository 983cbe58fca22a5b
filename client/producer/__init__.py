"""Producer side of the SDK: :class:`Producer`, queue selectors and the fault strategy."""
