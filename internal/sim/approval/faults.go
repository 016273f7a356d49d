package approval

// Faults are the submit-side faults in force; delivery faults (duplicate,
// delay, pause and reorder) live on the deliverer under
// /_control/deliveries. Counters count down per submit of a new form.
type Faults struct {
	// CallbackBeforeResponse decides the next N new forms at once and
	// delivers their callback — waiting for the service's 2xx — before the
	// submit call is answered: the race that puts APPROVAL_SENDING in the
	// callback guard's waiting set.
	CallbackBeforeResponse int `json:"callbackBeforeResponse"`
	// EarlyResult is the decision used for those; default: the policy's
	// rules (APPROVED unless a reject rule matches).
	EarlyResult Result `json:"earlyResult,omitempty"`
	// FailNext answers the next Count submits with Status, creating nothing.
	FailNext FailNext `json:"failNext"`
	// LoseResponseNext creates the next N forms and then drops the
	// connection without an answer (a lost response): the caller must look
	// up by operationId before submitting again.
	LoseResponseNext int `json:"loseResponseNext"`
	// HoldResponseNext creates the next Count new forms and then holds the
	// answer DelayMs long (or until the caller gives up): the caller is
	// stuck between the remote write and its own, where a crash test
	// kills it.
	HoldResponseNext HoldNext `json:"holdResponseNext"`
	// FailReadsNext answers the next Count reads of the public API (GET
	// /v1/approvals and GET /v1/approvals/{id}) with Status: the approval
	// system failing while the service polls it for a lost callback. The
	// control API's reads are never failed.
	FailReadsNext ReadFault `json:"failReadsNext"`
	// FailWithdrawsNext answers the next Count withdraw calls (POST
	// /v1/approvals/{id}/withdraw) with Status, withdrawing nothing: the
	// approval system failing while the service withdraws a request.
	FailWithdrawsNext FailNext `json:"failWithdrawsNext"`
	// HoldWithdrawsNext withdraws on the next Count withdraw calls and then
	// holds the answer DelayMs long (or until the caller gives up): the
	// withdrawing step is stuck between the remote write and its own,
	// where a crash test kills it.
	HoldWithdrawsNext HoldNext `json:"holdWithdrawsNext"`
}

// ReadFault answers Count public reads with Status. With ApprovalID set
// only reads of that one approval (GET /v1/approvals/{id}) are failed, so a
// test can aim the failure at one request's read-back while other requests'
// pollers keep reading the same simulator.
type ReadFault struct {
	Status     int    `json:"status"`
	Count      int    `json:"count"`
	ApprovalID string `json:"approvalId,omitempty"`
}

// HoldNext holds the answer of Count requests DelayMs long.
type HoldNext struct {
	Count   int `json:"count"`
	DelayMs int `json:"delayMs"`
}

// FailNext answers Count requests with Status.
type FailNext struct {
	Status int `json:"status"`
	Count  int `json:"count"`
}
