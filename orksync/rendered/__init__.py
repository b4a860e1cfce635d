"""The rendered directory: the reviewable contract between `orksync render` and `orksync apply`."""
