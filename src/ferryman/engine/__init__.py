"""The turn engine: the loop of inference, tools and shields, with no HTTP and no SQL."""
