"""Loading a repository: Katalogs, Motifs, CRDs and custom resources. No cluster access."""
