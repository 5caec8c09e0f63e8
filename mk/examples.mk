# mk/examples.mk — examples/: a custom trainer that reports to ddptop through
# transport/'s public API. Built with `make` (part of all), linked against
# transport/'s libraries only.
EXAMPLE_BINS := $(BUILD)/examples/custom_trainer

all: $(EXAMPLE_BINS)

$(BUILD)/examples/custom_trainer: $(BUILD)/examples/custom_trainer.o $(call libs_of,net)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(call ext_of,net)
