// Package pool is the one bounded worker pool of the landers: a Land call
// cuts its items into chunks and writes them on at most a fixed number of
// goroutines (pglander's statements, redislander's pipelines,
// dynamolander's requests). Every lander cancels the same way: the first
// failed chunk cancels the context of the others, no chunk starts after it,
// Run waits for every chunk it started, and the error it returns names the
// failed chunk.
package pool

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ubiksql/ubik/land"
)

// Run calls write on the chunks [lo, hi) of n items, size items per chunk
// (the last may be shorter), at most limit at once, and adds their results.
// what names the unit in errors ("records", "keys"). The first error cancels
// ctx for the chunks still running (a write must return when its ctx is
// done); Run returns after every write it started has returned, with that
// first error, wrapped with the chunk it came from, and a zero Result: a
// failed Land call counts nothing, the caller retries it whole.
func Run(ctx context.Context, n, size, limit int, what string,
	write func(ctx context.Context, lo, hi int) (land.Result, error)) (land.Result, error) {
	if size < 1 || limit < 1 {
		return land.Result{}, fmt.Errorf("pool: chunk size %d and limit %d must be positive", size, limit)
	}
	chunks := (n + size - 1) / size
	wrap := func(c, lo, hi int, err error) error {
		return fmt.Errorf("%s %d..%d of %d (chunk %d of %d): %w", what, lo, hi-1, n, c+1, chunks, err)
	}
	if chunks == 1 {
		// One chunk runs on the caller's goroutine.
		r, err := write(ctx, 0, n)
		if err != nil {
			return land.Result{}, wrap(0, 0, n, err)
		}
		return r, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	var (
		mu  sync.Mutex
		res land.Result
	)
	for c := range chunks {
		// Go blocks while limit writes run; a failure among them cancels
		// gctx, and then nothing more starts.
		if gctx.Err() != nil {
			break
		}
		lo, hi := c*size, min((c+1)*size, n)
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // cancelled before it began: skip it
			}
			r, err := write(gctx, lo, hi)
			if err != nil {
				return wrap(c, lo, hi, err)
			}
			mu.Lock()
			res = res.Add(r)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return land.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		// The caller's context ended between chunks: some never ran.
		return land.Result{}, fmt.Errorf("pool: %d %s: %w", n, what, err)
	}
	return res, nil
}
