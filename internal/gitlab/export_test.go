package gitlab

// SetPipelinePaging sets ListMRPipelines' page size and page bound, so a
// test crosses pages and reaches the bound with a handful of pipelines.
func SetPipelinePaging(c *Client, perPage, maxPages int) {
	c.pipelinesPerPage, c.maxPipelinePages = perPage, maxPages
}

// SetOpenMRPaging sets ListOpenMRs' page size and page bound.
func SetOpenMRPaging(c *Client, perPage, maxPages int) {
	c.openMRsPerPage, c.maxOpenMRPages = perPage, maxPages
}
