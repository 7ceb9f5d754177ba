package exec

import "github.com/ubiksql/ubik/internal/types"

// EmittedRow returns the projected row (the SELECT list's values, typed)
// of the record being emitted: valid only during the Config.Emit call
// that delivers it. A host that feeds a view's rows to a query over the
// view takes them here, as the view computed them, so nothing is lost to
// the record's JSON rendering (a NaN or an infinity, which the value
// renders as null, stays what it is).
func (o *Operator) EmittedRow() []types.Value { return o.outRow }
