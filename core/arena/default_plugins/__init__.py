"""arena's built-ins, registered through the same hooks as any third-party plugin."""
