"""ppipe_tools: the code of ppipe-compare beyond its command line, one
module per part."""
