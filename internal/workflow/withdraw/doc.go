// Package withdraw is a requester's withdrawal and an operator's close of
// a request before it lands: the guarded write decides where the request
// stands (store.OperationWithdraw, from domain.Withdraw's table), then
// the withdraw step does the upstream half — the approval withdrawn, or
// the MR (a batch's, after settling the batch without the member) closed
// and read again, merged wins.
package withdraw
