// Package flowtest is test support for the flow packages' unit tests
// (callbacks, lifecycle, single, reconcile, withdraw, batch): what their
// in-memory fakes share, so each package's fake keeps only what its own
// Store interface adds.
//
//   - Store: the store operations several flows' Store interfaces share
//     (OperationGet, BindingGet, BindingGetByOperation, BatchGet,
//     WorkCallbackApply), answering from maps and scripted values and
//     recording every call.
//   - GitLab: a scripted gitlab.GitLab for the calls the steps under test
//     make (find, read and close an MR; list and re-run its pipelines).
//   - Approval: a scripted approval.Service (read back, find by request,
//     withdraw).
//   - Observer: a flow.Observer that records every event as a line.
//   - Config and Targets: a configuration snapshot over an overlay.
//
// A fake decides nothing and enforces no invariant: what the store's
// guards do is proven on both databases by storetest.Each
// (docs/storage.md), so a fake's test proves what a flow does with each
// answer the store can give.
//
// It is test support only: its files are not _test.go files so that other
// packages' tests can import it, and for that reason nothing but tests may
// import it (TestOnlyTestsImportFlowtest fails if a non-test file does).
package flowtest
