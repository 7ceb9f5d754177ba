package dynamolander

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"
	"github.com/ubiksql/ubik/land"
)

// Errors of the package.
var (
	ErrNoClient = errors.New("dynamolander: no client")
	ErrItem     = errors.New("dynamolander: malformed item")
)

// configErr returns land.ErrConfig naming what to check when DynamoDB's
// error code points at the configuration, nil otherwise (throttling, an
// internal error and a failure to reach the service stay transient).
func (l *Lander) configErr(err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return nil
	}
	var check string
	switch api.ErrorCode() {
	case "ResourceNotFoundException":
		check = "the table " + l.o.Table + " must exist in this region and endpoint (the lander creates it at start unless told not to)"
	case "AccessDeniedException":
		check = "the IAM policy must allow dynamodb:UpdateItem and dynamodb:GetItem on " + l.o.Table
	case "UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationTokenException",
		"IncompleteSignatureException", "ExpiredTokenException", "InvalidClientTokenId":
		check = "the credentials (access key, secret, session token) and the region"
	default:
		return nil
	}
	return fmt.Errorf("%w: DynamoDB %s on %s; check: %s: %w", land.ErrConfig, api.ErrorCode(), l.o.Table, check, err)
}
