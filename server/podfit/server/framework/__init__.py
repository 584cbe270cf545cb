"""The scheduling framework: extension points, cycle state, statuses, profiles and the runtime."""
