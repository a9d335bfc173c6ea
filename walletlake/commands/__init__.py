"""One module per ``walletlake`` sub-command; each turns arguments into calls of the packages."""
