// Package reconcile repairs what a lost callback left behind: MERGED
// bindings whose deploy callback never arrived (an exact match in the
// callback inbox, or the deploy watermark), and approval decisions
// recorded in the inbox but never applied. Every repair goes through the
// callbacks' own guards, so a repair racing the callback flips once.
package reconcile
