package cli

import (
	"context"
	"errors"
)

// runRun is a placeholder until its issue lands.
func runRun(ctx context.Context, env *Env, args []string) error {
	return errors.New("run: not implemented yet")
}
