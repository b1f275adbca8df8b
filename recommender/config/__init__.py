"""What a user hands the tool: the search spec, its traffic and SLA, and where results go. Parsed once into typed
objects; every refusal names its field.
"""
