package cli

import (
	"context"
	"errors"
)

// runUsage is a placeholder until its issue lands.
func runUsage(ctx context.Context, env *Env, args []string) error {
	return errors.New("usage: not implemented yet")
}
