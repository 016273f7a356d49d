package gitlab

// SetPipelinePaging sets ListMRPipelines' page size and page bound, so a
// test crosses pages and reaches the bound with a handful of pipelines.
func SetPipelinePaging(c *Client, perPage, maxPages int) {
	c.pipelinesPerPage, c.maxPipelinePages = perPage, maxPages
}
