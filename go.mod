module github.com/ubiksql/ubik

go 1.26
