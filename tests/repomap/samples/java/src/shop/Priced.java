package shop;

public interface Priced {
    double price();
}
