"""Declaring an SCM: node specs and families, the node equation, forward simulation,
identification checks and exact discrete SCMs. Imports nothing above it."""
