module orksync/gotemplate-oracle

go 1.22
