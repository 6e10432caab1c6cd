"""The plugin's name in the registry and in statuses (kube's names.DefaultPreemption)."""

NAME = "DefaultPreemption"
