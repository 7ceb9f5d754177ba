// Package ubik is the embedding API of the ubik streaming SQL engine.
//
// A host opens an Engine, starts a Query from SQL, pushes events (JSON bytes
// or typed rows), and pulls the changelog: one upsert per (group, window)
// carrying the whole current value, keyed by the frozen key contract
// (docs/contract.md). ubik owns no store; the host lands the records.
//
//	eng, _ := ubik.Open(ubik.DefaultOptions())
//	q, _ := eng.Start(sql, ubik.QueryOptions{})
//	for _, line := range lines {
//		if err := q.Push(line); err != nil { ... } // malformed events are counted and reported
//	}
//	q.Close() // end of input: every window finalizes
//	for rec := range q.Records() {
//		fmt.Printf("%s\t%s\n", rec.Key, rec.Value)
//	}
//
// A Query is not safe for concurrent use; the Engine is.
package ubik
