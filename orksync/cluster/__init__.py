"""The connection to the cluster and the identities requests are sent as."""
