"""The maintenance pages: the request form, its defaults and previews."""
