"""The checkpoint list: its rows, search, filters, sorts and counts, and the hour's trends."""
