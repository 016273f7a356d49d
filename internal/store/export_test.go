package store

// Test-only access to unexported helpers for the external store_test
// package (which may import storetest; this package may not).

// Translate is translate.
func Translate(err error) error { return translate(err) }

// IsCheckViolation is isCheckViolation.
func IsCheckViolation(err error) bool { return isCheckViolation(err) }
