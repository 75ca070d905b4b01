"""What the tests share, by what it provides (imported as ``support.<module>``)."""
