"""The HTTP side of the server: the app and its route table, middleware, the route groups (`routes/`)
and the OpenAI-compatible request and output shapes (`openai/`)."""
