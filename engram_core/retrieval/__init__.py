"""How a query finds memories: the search mirror, fusion, ranking, recall and injection."""
