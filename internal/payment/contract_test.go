package payment_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/logistics"
	"callgate/internal/payment"
	"callgate/internal/testenv"
)

// TestContractNamesEveryNotification: the downstream contract
// (internal/downstream/asyncapi.yaml) lists exactly the routing keys the
// handlers write, and takes every exception kind the payment handler
// reports.
func TestContractNamesEveryNotification(t *testing.T) {
	c := testenv.MustContract(t)
	written := append(payment.RoutingKeys(), logistics.RoutingShipmentUpdated, logistics.RoutingOrderDelivered)
	slices.Sort(written)
	require.Equal(t, written, c.RoutingKeys())
	for _, kind := range payment.ExceptionKinds() {
		body := fmt.Sprintf(`{"orderCode":"O-1","paymentNo":"P-1","kind":%q,"amount":1,"currency":"CNY"}`, kind)
		require.NoError(t, c.Validate(payment.RoutingPaymentException, []byte(body)), kind)
	}
}
