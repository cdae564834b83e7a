"""Who is calling: principals, how requests prove who they are, and what each may do."""
