package pglander

import "github.com/ubiksql/ubik/changelog"

func landRecs(r ...changelog.Record) []changelog.Record { return r }
