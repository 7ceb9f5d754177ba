module github.com/ubiksql/ubik/usage

go 1.26.0

replace github.com/ubiksql/ubik => ../

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/ubiksql/ubik v0.0.0
	github.com/ubiksql/ubik/land v0.0.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/ubiksql/ubik/land => ../land
