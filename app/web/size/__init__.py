"""The sizing wing: the /size page (form state in the URL), its .json twin and POST /api/v1/size."""
