package cli

import (
	"context"
	"errors"
)

// runLand is a placeholder until its issue lands.
func runLand(ctx context.Context, env *Env, args []string) error {
	return errors.New("land: not implemented yet")
}
