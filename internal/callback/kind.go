package callback

// The demo kinds. A kind names a queue (<prefix>.<kind>) and the handler the
// worker runs for it; sources declare which kind they send.
const (
	KindPayment   = "payment"
	KindLogistics = "logistics"
)
